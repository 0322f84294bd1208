//! Series configuration: what one series of the experiment matrix runs, read from TOML.
//!
//! Every field has the paper's default, so a series file states only what differs from the
//! stationary series C1. Unknown fields are rejected. [`SeriesConfig::validate`] checks every
//! rule before any work starts and names the series, the field, the value and the rule broken.

use ach_control::AchConfig;
use ach_telemetry::{
    DistortionConfig, DistortionConfigError, TelemetryConfig, TelemetryConfigError,
};
use serde::{Deserialize, Serialize};

use crate::algorithms::Registry;
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
pub const A0: &str = "Static-W";

/// The algorithms of the paper, in the order of its tables.
pub const ALGORITHMS: [&str; 5] = ["Static-W", "Static-Wt", "Dynamic-R", "Bounded-Loads", "ACH"];

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
}

impl Default for TelemetryParams {
    fn default() -> Self {
        let c = TelemetryConfig::paper();
        TelemetryParams {
            beta: c.beta,
            weights: c.weights,
            p: c.p,
            alpha: c.alpha,
        }
    }
}

impl TelemetryParams {
    /// As the telemetry crate's configuration.
    pub fn config(&self) -> TelemetryConfig {
        TelemetryConfig {
            beta: self.beta,
            weights: self.weights,
            p: self.p,
            alpha: self.alpha,
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

    /// This series with the fields of a sweep point set (and the fields linked to them).
    /// The error names the sweep field, the value and the rule broken; [`Self::validate`]
    /// checks every point, so a validated series' points never fail.
    pub fn at_point(&self, point: &SweepPoint) -> Result<SeriesConfig, ConfigError> {
        let mut c = self.clone();
        let links = self.sweep.as_ref().map(Sweep::links).unwrap_or_default();
        for coordinate in &point.coordinates {
            let path = crate::sweep::resolve_path(&coordinate.parameter);
            let fail = |rule: String| ConfigError {
                series: self.name.clone(),
                field: format!("sweep.{}", coordinate.parameter),
                value: coordinate.value.to_string(),
                rule,
            };
            crate::sweep::set_field(&mut c, path, coordinate.value).map_err(fail)?;
            for (target, _, ratio) in links.iter().filter(|(_, of, _)| of == path) {
                let linked = ratio * coordinate.value;
                crate::sweep::set_field(&mut c, target, linked).map_err(|rule| {
                    fail(format!(
                        "gives the linked field {target} = {linked} which {rule}"
                    ))
                })?;
            }
        }
        Ok(c)
    }

    /// Checks every rule, with the built-in algorithms; returns the first one broken.
    pub fn validate(&self, profile: Profile) -> Result<(), ConfigError> {
        self.validate_with(profile, &Registry::built_in())
    }

    /// Checks every rule; `algorithms` may name any algorithm of `registry`.
    pub fn validate_with(&self, profile: Profile, registry: &Registry) -> Result<(), ConfigError> {
        let fail = |field: &str, value: &dyn std::fmt::Display, rule: &str| ConfigError {
            series: self.name.clone(),
            field: field.to_string(),
            value: value.to_string(),
            rule: rule.to_string(),
        };
        if self.name.trim().is_empty() {
            return Err(fail("name", &"\"\"", "must not be empty"));
        }
        // The name becomes a folder and a file name of the results (`runs/<name>/`,
        // `config/<name>.toml`), so it must not be able to leave the output folder.
        let name_is_a_plain_file_name = self
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            && !self.name.starts_with('.');
        if !name_is_a_plain_file_name {
            return Err(fail(
                "name",
                &format!("{:?}", self.name),
                "must use only letters, digits, '_', '-' and '.', and not start with '.'",
            ));
        }
        if self.runs == 0 {
            return Err(fail("runs", &self.runs, "must be >= 1"));
        }
        if self.seed_stride == 0 {
            return Err(fail(
                "seed_stride",
                &self.seed_stride,
                "must be >= 1 (every run needs its own seed)",
            ));
        }
        if self.steps == 0 {
            return Err(fail("steps", &self.steps, "must be >= 1"));
        }
        if self.warmup >= self.steps {
            return Err(fail(
                "warmup",
                &self.warmup,
                &format!("must be < steps = {}", self.steps),
            ));
        }
        if self.tokens == 0 {
            return Err(fail("tokens", &self.tokens, "must be >= 1"));
        }
        if self.keys == 0 {
            return Err(fail("keys", &self.keys, "must be >= 1"));
        }
        if profile == Profile::Paper && self.keys < self.tokens {
            return Err(fail(
                "keys",
                &self.keys,
                &format!(
                    "must be >= tokens = {} in the paper profile (token positions are the first \
                     key hashes)",
                    self.tokens
                ),
            ));
        }
        if !(self.zipf_s.is_finite() && self.zipf_s >= 0.0) {
            return Err(fail("zipf_s", &self.zipf_s, "must be a finite number >= 0"));
        }
        check_probability(self.write_fraction)
            .map_err(|rule| fail("write_fraction", &self.write_fraction, rule))?;
        if self.algorithms.is_empty() {
            return Err(fail(
                "algorithms",
                &"[]",
                "must name at least one algorithm",
            ));
        }
        for (k, name) in self.algorithms.iter().enumerate() {
            if registry.get(name).is_none() {
                return Err(fail(
                    &format!("algorithms[{k}]"),
                    &format!("{name:?}"),
                    &format!("must be one of {}", registry.names()),
                ));
            }
            if self.algorithms[..k].contains(name) {
                return Err(fail(
                    &format!("algorithms[{k}]"),
                    &format!("{name:?}"),
                    "is named twice (each algorithm runs once per series)",
                ));
            }
        }
        let n0 = self.cluster.classes.len();
        if n0 == 0 {
            return Err(fail(
                "cluster.classes",
                &"[]",
                "must have at least one node",
            ));
        }
        if !(self.cluster.mu_base.is_finite() && self.cluster.mu_base > 0.0) {
            return Err(fail(
                "cluster.mu_base",
                &self.cluster.mu_base,
                "must be > 0",
            ));
        }
        self.validate_load()
            .map_err(|(field, value, rule)| fail(&field, &value, &rule))?;
        let noise = &self.noise;
        if !(noise.sigma.is_finite() && noise.sigma >= 0.0) {
            return Err(fail(
                "noise.sigma",
                &noise.sigma,
                "must be a finite number >= 0",
            ));
        }
        check_probability(noise.p_miss)
            .map_err(|rule| fail("noise.p_miss", &noise.p_miss, rule))?;
        noise.distortion().validate().map_err(|e| {
            let (field, value, rule) = distortion_rule(&e);
            fail(&field, &value, &rule)
        })?;
        self.telemetry.config().validate().map_err(|e| {
            let (field, value, rule) = telemetry_rule(&e);
            fail(&field, &value, &rule)
        })?;
        self.ach
            .validate()
            .map_err(|e| fail(&format!("ach.{}", e.field), &e.value, &e.rule))?;
        let v_min = self.ach.v_min;
        let max_nodes = self.max_nodes();
        if v_min.saturating_mul(max_nodes) > self.tokens {
            return Err(fail(
                "ach.v_min",
                &v_min,
                &format!(
                    "times the {max_nodes} nodes the cluster ever has must be <= tokens = {}",
                    self.tokens
                ),
            ));
        }
        self.validate_events(profile)
            .map_err(|(field, value, rule)| fail(&field, &value, &rule))?;
        if let Some(filter) = &self.ach_f
            && filter.window == 0
        {
            return Err(fail(
                "ach_f.window",
                &filter.window,
                "must be >= 1 (1 is plain ACH)",
            ));
        }
        if self.against_a0 && !self.algorithms.iter().any(|a| a == A0) {
            return Err(fail(
                "against_a0",
                &true,
                &format!("needs {A0:?} in algorithms, the arm every other one is paired against"),
            ));
        }
        if let Some(ch_bl) = &self.ch_bl
            && !(ch_bl.eps.is_finite() && ch_bl.eps > 0.0)
        {
            return Err(fail(
                "ch_bl.eps",
                &ch_bl.eps,
                "must be a finite number > 0 (each node serves up to (1 + eps) times its share)",
            ));
        }
        if let Some(sweep) = &self.sweep {
            self.validate_sweep(sweep, profile)?;
        }
        Ok(())
    }

    fn validate_sweep(&self, sweep: &Sweep, profile: Profile) -> Result<(), ConfigError> {
        let fail = |field: String, value: String, rule: String| ConfigError {
            series: self.name.clone(),
            field,
            value,
            rule,
        };
        for (name, values) in &sweep.fields {
            if values.is_empty() && sweep.mode == SweepMode::Grid {
                return Err(fail(
                    format!("sweep.{name}"),
                    "[]".into(),
                    "must list at least one value in grid mode".into(),
                ));
            }
            for (k, value) in values.iter().enumerate() {
                if values[..k].contains(value) {
                    return Err(fail(
                        format!("sweep.{name}"),
                        value.to_string(),
                        "is listed twice (every point needs its own folder)".into(),
                    ));
                }
            }
        }
        if self.sweep_points().is_empty() {
            return Err(fail(
                "sweep".into(),
                "{}".into(),
                "must list at least one value".into(),
            ));
        }
        if let Some(ratio) = sweep.eps_off_ratio
            && !(ratio > 0.0 && ratio < 1.0)
        {
            return Err(fail(
                "sweep.eps_off_ratio".into(),
                ratio.to_string(),
                "must be in (0, 1)".into(),
            ));
        }
        let swept: Vec<&str> = sweep
            .fields
            .iter()
            .map(|(name, _)| crate::sweep::resolve_path(name))
            .collect();
        for (target, link) in &sweep.linked {
            let field = format!("sweep.linked.{target}");
            if !swept.contains(&crate::sweep::resolve_path(&link.of)) {
                return Err(fail(
                    field,
                    format!("{{ of = {:?} }}", link.of),
                    format!("must follow a swept field (one of {})", swept.join(", ")),
                ));
            }
            if swept.contains(&crate::sweep::resolve_path(target)) {
                return Err(fail(
                    field,
                    format!("{:?}", target),
                    "must not be a swept field itself".into(),
                ));
            }
            if !link.ratio.is_finite() {
                return Err(fail(
                    format!("{field}.ratio"),
                    link.ratio.to_string(),
                    "must be a finite number".into(),
                ));
            }
        }
        for point in self.sweep_points() {
            let mut at = self.at_point(&point)?;
            at.sweep = None;
            at.validate(profile).map_err(|e| {
                let linked = sweep
                    .links()
                    .into_iter()
                    .find(|(target, _, _)| *target == e.field)
                    .map(|(target, of, ratio)| format!(" (linked: {target} = {ratio} x {of})"))
                    .unwrap_or_default();
                let (field, value) = match point.only() {
                    Some(c) => (format!("sweep.{}", c.parameter), c.value.to_string()),
                    None => ("sweep point".to_string(), point.label()),
                };
                fail(
                    field,
                    value,
                    format!("gives {} = {}{linked} which {}", e.field, e.value, e.rule),
                )
            })?;
        }
        Ok(())
    }

    fn validate_load(&self) -> Result<(), (String, String, String)> {
        // A node's requests and writes of one step are summed in the two 32-bit halves of one
        // `u64` (see `run.rs`). With this cap and an amplitude below 1, a step's mean is below
        // 2e9 requests, and a Poisson count reaching 2^32 ~ 4.3e9 is beyond any probability a
        // run could meet (tens of thousands of standard deviations).
        const MAX_RATE: f64 = 1e9;
        let positive = |field: &str, v: f64| {
            if !(v.is_finite() && v > 0.0) {
                Err((
                    format!("load.{field}"),
                    v.to_string(),
                    "must be > 0".to_string(),
                ))
            } else if field != "period" && v > MAX_RATE {
                Err((
                    format!("load.{field}"),
                    v.to_string(),
                    format!("must be <= {MAX_RATE:e} requests per step"),
                ))
            } else {
                Ok(())
            }
        };
        match self.load {
            LoadProfile::Constant { lambda } => positive("lambda", lambda),
            LoadProfile::StepPeriodic {
                lambda,
                high,
                amplitude,
                period,
                ..
            } => {
                positive("lambda", lambda)?;
                positive("high", high)?;
                positive("period", period)?;
                if !(0.0..1.0).contains(&amplitude) {
                    return Err((
                        "load.amplitude".into(),
                        amplitude.to_string(),
                        "must be in [0, 1) so that the rate stays positive".into(),
                    ));
                }
                Ok(())
            }
        }
    }

    fn validate_events(&self, profile: Profile) -> Result<(), (String, String, String)> {
        for (k, d) in self.degradation.iter().enumerate() {
            if !(d.factor.is_finite() && d.factor > 0.0) {
                return Err((
                    format!("degradation[{k}].factor"),
                    d.factor.to_string(),
                    "must be > 0".into(),
                ));
            }
            if d.t >= self.steps {
                return Err((
                    format!("degradation[{k}].t"),
                    d.t.to_string(),
                    format!("must be < steps = {}", self.steps),
                ));
            }
        }
        // Replay membership in time order to check every node named exists and is live.
        let mut events: Vec<(u32, usize, Event<'_>)> = Vec::new();
        for (k, d) in self.degradation.iter().enumerate() {
            events.push((d.t, k, Event::Degrade(d)));
        }
        for (k, c) in self.churn.iter().enumerate() {
            events.push((c.t, k, Event::Churn(c)));
        }
        events.sort_by_key(|&(t, k, ref e)| (t, matches!(e, Event::Churn(_)), k));
        let mut live: Vec<bool> = vec![true; self.cluster.classes.len()];
        for (_, k, event) in events {
            match event {
                Event::Degrade(d) => {
                    for (j, &node) in d.nodes.iter().enumerate() {
                        if !live.get(node as usize).copied().unwrap_or(false) {
                            return Err((
                                format!("degradation[{k}].nodes[{j}]"),
                                node.to_string(),
                                format!("must name a live node at t = {}", d.t),
                            ));
                        }
                    }
                }
                Event::Churn(c) => {
                    if c.t >= self.steps {
                        return Err((
                            format!("churn[{k}].t"),
                            c.t.to_string(),
                            format!("must be < steps = {}", self.steps),
                        ));
                    }
                    for (j, &node) in c.remove.iter().enumerate() {
                        let field = format!("churn[{k}].remove[{j}]");
                        if !live.get(node as usize).copied().unwrap_or(false) {
                            return Err((
                                field,
                                node.to_string(),
                                format!("must name a live node at t = {}", c.t),
                            ));
                        }
                        if live.iter().filter(|&&l| l).count() == 1 {
                            return Err((
                                field,
                                node.to_string(),
                                "must not remove the last node".into(),
                            ));
                        }
                        if profile == Profile::Paper && node == 0 {
                            return Err((
                                field,
                                node.to_string(),
                                "must not be node 0 in the paper profile (its tokens go to node 0)"
                                    .into(),
                            ));
                        }
                        live[node as usize] = false;
                    }
                    live.extend(c.add.iter().map(|_| true));
                }
            }
        }
        Ok(())
    }
}

enum Event<'a> {
    Degrade(&'a Degradation),
    Churn(&'a Churn),
}

/// The field (as a path in the series file), the value and the rule of a distortion error.
fn distortion_rule(error: &DistortionConfigError) -> (String, String, String) {
    match *error {
        DistortionConfigError::Sigma { value } => (
            "noise.sigma".into(),
            value.to_string(),
            "must be a finite number >= 0".into(),
        ),
        DistortionConfigError::Lag { value, max } => (
            "noise.lag".into(),
            value.to_string(),
            format!("must be <= {max}"),
        ),
        DistortionConfigError::MissingProbability { value } => (
            "noise.p_miss".into(),
            value.to_string(),
            "must be a probability in [0, 1]".into(),
        ),
    }
}

/// The field (as a path in the series file), the value and the rule of a telemetry error.
fn telemetry_rule(error: &TelemetryConfigError) -> (String, String, String) {
    match *error {
        TelemetryConfigError::Beta { value } => (
            "telemetry.beta".into(),
            value.to_string(),
            "must be in (0, 1]".into(),
        ),
        TelemetryConfigError::Weights { value } => (
            "telemetry.weights".into(),
            format!("[{}, {}, {}]", value[0], value[1], value[2]),
            "must be finite numbers >= 0, not all 0".into(),
        ),
        TelemetryConfigError::Exponent { value } => (
            "telemetry.p".into(),
            value.to_string(),
            "must be a finite number >= 1".into(),
        ),
        TelemetryConfigError::Alpha { value } => (
            "telemetry.alpha".into(),
            value.to_string(),
            "must be in [0, 1]".into(),
        ),
    }
}

fn check_probability(p: f64) -> Result<(), &'static str> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err("must be a probability in [0, 1]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_series_parse_and_validate() {
        let all = built_in_series();
        assert_eq!(all.len(), 8);
        for s in &all {
            s.validate(Profile::Paper).unwrap();
            s.validate(Profile::Corrected).unwrap();
        }
        for s in &opt_in_series() {
            s.validate(Profile::Paper).unwrap();
            s.validate(Profile::Corrected).unwrap();
        }
        let scale = &opt_in_series()[1];
        let largest = scale
            .at_point(scale.sweep_points().last().unwrap())
            .unwrap();
        assert_eq!(largest.cluster.classes.len(), 1000);
        assert_eq!(largest.tokens, 100_000);
        assert_eq!(largest.load.rate(0), 143_750.0);
        let c5 = &all[7];
        assert_eq!(c5.sweep_points().len(), 19);
        let p = c5.at_point(&SweepPoint::single("eps_on", 0.05)).unwrap();
        assert_eq!(p.ach.eps_on, 0.05);
        assert!((p.ach.eps_off - 0.02).abs() < 1e-15);
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
    fn a_grid_sweep_sets_its_fields_and_their_links_at_every_point() {
        let c = SeriesConfig::from_toml(
            "name = \"G\"\n[sweep]\nmode = \"grid\"\n\"noise.sigma\" = [0.0, 0.05]\n\
             \"cluster.nodes\" = [10, 20]\n\
             [sweep.linked]\ntokens = { of = \"cluster.nodes\", ratio = 100 }\n",
        )
        .unwrap();
        c.validate(Profile::Paper).unwrap();
        let points = c.sweep_points();
        assert_eq!(points.len(), 4);
        let last = c.at_point(&points[3]).unwrap();
        assert_eq!(last.noise.sigma, 0.05);
        assert_eq!(last.cluster.classes.len(), 20);
        assert_eq!(last.tokens, 2000);
        assert_eq!(last.sweep, c.sweep);
    }

    #[test]
    fn sweep_errors_name_the_field_the_value_and_the_rule() {
        let error = |text: &str| {
            SeriesConfig::from_toml(&format!("name = \"G\"\n[sweep]\n{text}"))
                .unwrap()
                .validate(Profile::Paper)
                .unwrap_err()
                .to_string()
        };
        assert!(
            error("\"noise.sgima\" = [0.1]\n")
                .starts_with("series G: sweep.noise.sgima = 0.1 must name a numeric field")
        );
        assert_eq!(
            error("tokens = [1000, 1500.5]\n"),
            "series G: sweep.tokens = 1500.5 must be a whole number >= 0 for this field"
        );
        assert_eq!(
            error("\"noise.sigma\" = [0.1, -1.0]\n"),
            "series G: sweep.noise.sigma = -1 gives noise.sigma = -1 which must be a finite \
             number >= 0"
        );
        assert_eq!(
            error(
                "\"ach.eps_on\" = [0.1]\n[sweep.linked]\n\"ach.eps_off\" = { of = \"tau\", ratio = 0.4 }\n"
            ),
            "series G: sweep.linked.ach.eps_off = { of = \"tau\" } must follow a swept field \
             (one of ach.eps_on)"
        );
        assert_eq!(
            error("mode = \"grid\"\n\"noise.sigma\" = [0.1, -1]\n\"ach.eps_on\" = [0.1]\n"),
            "series G: sweep point = noise.sigma=-1,ach.eps_on=0.1 gives noise.sigma = -1 which \
             must be a finite number >= 0"
        );
        assert_eq!(
            error("mode = \"grid\"\n\"noise.sigma\" = [0.1]\n\"zipf_s\" = []\n"),
            "series G: sweep.zipf_s = [] must list at least one value in grid mode"
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

    #[test]
    fn errors_name_series_field_value_and_rule() {
        let mut c = SeriesConfig::from_toml("name = \"C7\"\n[ach]\neps_off = 0.2\n").unwrap();
        assert_eq!(
            c.validate(Profile::Paper).unwrap_err().to_string(),
            "series C7: ach.eps_off = 0.2 must be < eps_on = 0.1"
        );
        c.ach.eps_off = 0.04;
        c.churn.push(Churn {
            t: 5,
            remove: vec![12],
            add: vec![],
        });
        assert_eq!(
            c.validate(Profile::Paper).unwrap_err().to_string(),
            "series C7: churn[0].remove[0] = 12 must name a live node at t = 5"
        );
        assert!(SeriesConfig::from_toml("name = \"X\"\nbogus = 1\n").is_err());
    }

    #[test]
    fn ch_bl_eps_must_be_a_finite_positive_number() {
        let text = |eps: &str| format!("name = \"C7\"\n[ch_bl]\neps = {eps}\n");
        let ok = SeriesConfig::from_toml(&text("0.5")).unwrap();
        assert_eq!(ok.ch_bl, Some(ChBlConfig { eps: 0.5 }));
        assert!(ok.validate(Profile::Paper).is_ok());
        for (eps, shown) in [
            ("0.0", "0"),
            ("-0.1", "-0.1"),
            ("nan", "NaN"),
            ("inf", "inf"),
        ] {
            let c = SeriesConfig::from_toml(&text(eps)).unwrap();
            assert_eq!(
                c.validate(Profile::Paper).unwrap_err().to_string(),
                format!(
                    "series C7: ch_bl.eps = {shown} must be a finite number > 0 (each node serves up to (1 + eps) times its share)"
                )
            );
        }
        assert!(SeriesConfig::from_toml("name = \"X\"\n[ch_bl]\nc = 1.25\n").is_err());
        // Absent, it is not written, so other series keep their files and fingerprints.
        let plain = SeriesConfig::from_toml("name = \"C7\"\n").unwrap();
        assert!(!serde_json::to_string(&plain).unwrap().contains("ch_bl"));
    }
}
