//! Parameters of the ACH controller and their validation.

use serde::{Deserialize, Serialize};

/// Parameters of ACH (paper Table 1a). Build with [`AchConfig::paper`] and check with
/// [`AchConfig::validate`] before use.
///
/// Serialised with the paper's names (`M_max`, `M_H`, `H` for the budget fields); fields left
/// out take the paper's values, unknown fields are rejected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AchConfig {
    /// Target load `l*`.
    pub ell_star: f64,
    /// Hysteresis threshold to switch a node on (`eps_on`).
    pub eps_on: f64,
    /// Hysteresis threshold to switch a node off (`eps_off`), `0 < eps_off < eps_on`.
    pub eps_off: f64,
    /// Total load above which ACH stops correcting (`tau`).
    pub tau: f64,
    /// Total load below which ACH corrects at full strength (`tau_min < tau`).
    pub tau_min: f64,
    /// Half-saturation constant of the imbalance term (`kappa > 0`).
    pub kappa: f64,
    /// Per-step budget cap `M_max` (fraction of key space).
    #[serde(rename = "M_max")]
    pub m_max: f64,
    /// Horizon budget `M_H` (fraction of key space per `horizon` steps).
    #[serde(rename = "M_H")]
    pub m_horizon: f64,
    /// Horizon length `H` in steps.
    #[serde(rename = "H")]
    pub horizon: usize,
    /// Minimum tokens per node (`v_min`).
    pub v_min: usize,
    /// Optional maximum tokens per node (`v_max`).
    pub v_max: Option<usize>,
    /// When the horizon budget `M_H` applies ([`HorizonRule`]); the paper's rule by default.
    #[serde(skip_serializing_if = "HorizonRule::is_paper")]
    pub horizon_rule: HorizonRule,
    /// Whether a step may overshoot its budget `m` by up to one arc per source
    /// ([`StepRule`]); the paper's rule by default.
    #[serde(skip_serializing_if = "StepRule::is_paper")]
    pub step_rule: StepRule,
    /// Cool-down in steps: a token whose move was confirmed at step `t` is not moved again
    /// before step `t + cooldown`. 0 (the paper) turns it off.
    #[serde(skip_serializing_if = "is_zero")]
    pub cooldown: u64,
    /// What the target load `l*` is ([`TargetRule`]); the paper's fixed `ell_star` by default.
    #[serde(skip_serializing_if = "TargetRule::is_paper")]
    pub target: TargetRule,
    /// How the pooled tokens are split among the receivers ([`AssignRule`]); the paper's split
    /// by token count by default.
    #[serde(skip_serializing_if = "AssignRule::is_paper")]
    pub assign_rule: AssignRule,
    /// What the hysteresis thresholds and `kappa` are measured in ([`ThresholdRule`]); the
    /// paper's absolute load units by default.
    #[serde(skip_serializing_if = "ThresholdRule::is_paper")]
    pub threshold_rule: ThresholdRule,
    /// How sources choose the tokens they give ([`SelectRule`]); the paper's longest arcs first
    /// by default. [`SelectRule::ByTokenLoad`] needs per-token loads in the observation and
    /// falls back to the paper's rule without them.
    #[serde(skip_serializing_if = "SelectRule::is_paper")]
    pub select_rule: SelectRule,
    /// The smallest predicted gain of a plan that is carried out, in `[0, 1)`: a step whose
    /// plan is predicted to remove less than this fraction of the load above the target (the
    /// excess `sum_i max(l_i - l*, 0)`, see [`crate::gain`]) moves nothing. Every move costs
    /// its source a copy of the moved keys (on Valkey, a fork), whatever it gains; this keeps
    /// a step from paying that for a sliver of the imbalance. 0 (the paper) carries out every
    /// plan.
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub min_gain: f64,
}

/// What the hysteresis thresholds `eps_on`, `eps_off` and the intensity's `kappa` are
/// measured in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThresholdRule {
    /// The paper's rule: absolute load units, the deviation of node `i` is `l_i - l*`.
    #[default]
    Absolute,
    /// Relative to the target: the deviation is `(l_i - l*) / max(l*, idle_floor)`, so with the
    /// live mean as target `eps_on = 0.1` switches on a node 10 % above the mean load, however
    /// lightly loaded the cluster. Below a mean of `idle_floor` the deviations are measured
    /// against `idle_floor` instead: a node must be at least `eps_on * idle_floor` above the
    /// mean (in load units) to switch on, so an idle cluster's noise moves nothing (the
    /// absolute minimum of CockroachDB's store rebalancer for lightly loaded clusters).
    Relative {
        /// The smallest scale of the deviations, in load units (`> 0`).
        idle_floor: f64,
    },
}

impl ThresholdRule {
    fn is_paper(&self) -> bool {
        *self == ThresholdRule::Absolute
    }

    /// The unit the deviations from `target` are measured in: 1 under the paper's rule.
    pub fn scale(&self, target: f64) -> f64 {
        match *self {
            ThresholdRule::Absolute => 1.0,
            ThresholdRule::Relative { idle_floor } => target.max(idle_floor),
        }
    }
}

/// How the sources choose the tokens they give, and to whom.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SelectRule {
    /// The paper's rule (phases 1-3): each source gives its longest tokens up to its share of
    /// the budget, and the pool is split among the receivers by [`AssignRule`].
    #[default]
    Paper,
    /// With per-token loads (`Observation::token_loads`): tokens are taken in decreasing order
    /// of load relieved per key space moved, each source within the same share of the budget
    /// (and the same step rule) as under the paper's rule, and each token goes to the receiver
    /// with the most need left among those it would not make the hottest node; a token no
    /// receiver can take stays (see `planner::plan_by_token_load`). Without per-token loads,
    /// the paper's rule.
    ByTokenLoad,
}

impl SelectRule {
    fn is_paper(&self) -> bool {
        *self == SelectRule::Paper
    }
}

/// How the pooled tokens are split among the receivers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AssignRule {
    /// The paper's rule: receiver `j` gets `floor(n * r_j / sum r)` tokens (largest remainder),
    /// in pool order; fair when the arcs are alike.
    #[default]
    Paper,
    /// By key space: each token goes to the receiver owed the most arc (`r_j / sum r` of the
    /// pool's arc, minus what it got), so receivers share the moved key space by need even when
    /// arcs differ widely (see `planner::assign_tokens_by_arc`).
    ByArc,
}

impl AssignRule {
    fn is_paper(&self) -> bool {
        *self == AssignRule::Paper
    }
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

fn is_zero_f64(value: &f64) -> bool {
    *value == 0.0
}

/// When the horizon budget `M_H` applies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HorizonRule {
    /// The paper's rule: once at least `H` steps have been recorded, a step gets no budget if
    /// the last `H` steps spent `M_H` or more. Before step `H` nothing is checked, and the step
    /// that crosses `M_H` is not cut, so a window can exceed `M_H`.
    #[default]
    Paper,
    /// From the first step, a step's budget is at most `M_H` minus what the previous `H - 1`
    /// steps spent: the moved key space of any `H` consecutive steps never exceeds `M_H`.
    /// Since the window itself now holds the rate, the step cap is `M_max` alone (bursts up to
    /// `M_max * C` per step), not `min(M_max, M_H / H)`: with the paper's cap of `0.0025 * C`,
    /// a step of a ring of 1000 equal tokens could move a token (arc 0.001) only when
    /// `C > 0.4`, and a strict step rule would starve.
    Sliding,
}

impl HorizonRule {
    fn is_paper(&self) -> bool {
        *self == HorizonRule::Paper
    }
}

/// Whether a step may spend more than its budget `m`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepRule {
    /// The paper's rule: a source gives tokens while what it gave is below its share, so it
    /// gives at least one token and overshoots its share by up to one arc (the budget
    /// invariant `M_keys <= m + |O| * max_s L[s]`).
    #[default]
    Paper,
    /// A token that would take its source past its share is skipped and a shorter one may go:
    /// a step never spends more than `m`.
    Strict,
}

impl StepRule {
    fn is_paper(&self) -> bool {
        *self == StepRule::Paper
    }
}

/// What the target load `l*` is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetRule {
    /// The paper's fixed target `ell_star`.
    #[default]
    Fixed,
    /// The mean load of the live nodes (those with a finite load), recomputed every step.
    /// A cluster whose nodes all run above `ell_star` still balances: nodes above the mean
    /// give, nodes below it receive.
    LiveMean,
}

impl TargetRule {
    fn is_paper(&self) -> bool {
        *self == TargetRule::Fixed
    }
}

impl AchConfig {
    /// The paper's parameters (Table 1a).
    pub fn paper() -> AchConfig {
        AchConfig {
            ell_star: 0.65,
            eps_on: 0.10,
            eps_off: 0.04,
            tau: 0.85,
            tau_min: 0.50,
            kappa: 0.10,
            m_max: 0.02,
            m_horizon: 0.25,
            horizon: 100,
            v_min: 3,
            v_max: None,
            horizon_rule: HorizonRule::Paper,
            step_rule: StepRule::Paper,
            cooldown: 0,
            target: TargetRule::Fixed,
            assign_rule: AssignRule::Paper,
            threshold_rule: ThresholdRule::Absolute,
            select_rule: SelectRule::Paper,
            min_gain: 0.0,
        }
    }

    /// The configuration for a live cluster. The paper's parameters, with four rules that make
    /// the budget a promise and keep a real cluster balanced:
    ///
    /// * [`HorizonRule::Sliding`]: any `H` consecutive steps move at most `M_H`, from the first
    ///   step on (the paper checks the window only after `H` steps and lets a step cross it),
    ///   and a step may spend up to `M_max * C`, the window holding the rate;
    /// * [`StepRule::Strict`]: no step moves more than its budget `m` (the paper lets each source
    ///   overshoot by one arc, which on a ring of long hashed arcs is many times `m`);
    /// * `cooldown = 50` steps: a token that moved does not move again for half a horizon, so
    ///   noisy loads cannot make tokens ping-pong between two nodes;
    /// * [`TargetRule::LiveMean`]: the target is the mean load of the live nodes, so a cluster
    ///   that runs hot everywhere but unevenly still balances (with the fixed `l* = 0.65` every
    ///   node is a source and none a receiver);
    /// * [`AssignRule::ByArc`]: receivers share the moved key space by need, not the number of
    ///   tokens, which matters on rings whose arcs differ widely (key-weighted slots);
    /// * [`ThresholdRule::Relative`] with `idle_floor = 0.05`: `eps_on`, `eps_off` and `kappa`
    ///   are fractions of the mean load, so a cluster far below saturation (loads near 0.01 to
    ///   0.1, where the paper's absolute `eps_on = 0.1` is never crossed) is balanced as soon as
    ///   a node runs 10 % above the mean, while a node less than `0.1 * 0.05 = 0.005` load
    ///   units above the mean of a nearly idle cluster is left alone (an idle Valkey or Redis
    ///   node reads 0.002 to 0.01 cores of cpu for its own timers and cluster bus);
    /// * [`SelectRule::ByTokenLoad`]: with per-token loads (Valkey's per-slot statistics), the
    ///   tokens that relieve the most load per key copied, never to a receiver they would make
    ///   the hottest node (no ping-pong of a hot slot); without them, the paper's rule;
    ///
    /// and `tau = 1.2`, `tau_min = 0.6`: the paper stops correcting when the total load reaches
    /// `tau = 0.85`, which in a live cluster is when balancing matters most; the budget, not the
    /// load, bounds the cost of moving. At total load 1 the intensity's gamma is still 1/3.
    ///
    /// ```
    /// let live = ach_control::AchConfig::live();
    /// assert!(live.validate().is_ok());
    /// assert_eq!(live.m_horizon, 0.25);
    /// ```
    pub fn live() -> AchConfig {
        AchConfig {
            tau: 1.2,
            tau_min: 0.6,
            horizon_rule: HorizonRule::Sliding,
            step_rule: StepRule::Strict,
            cooldown: 50,
            target: TargetRule::LiveMean,
            assign_rule: AssignRule::ByArc,
            threshold_rule: ThresholdRule::Relative { idle_floor: 0.05 },
            select_rule: SelectRule::ByTokenLoad,
            ..AchConfig::paper()
        }
    }

    /// Checks every rule of the spec; returns the first one broken.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let finite = [
            ("ell_star", self.ell_star),
            ("eps_on", self.eps_on),
            ("eps_off", self.eps_off),
            ("tau", self.tau),
            ("tau_min", self.tau_min),
            ("kappa", self.kappa),
            ("M_max", self.m_max),
            ("M_H", self.m_horizon),
            ("min_gain", self.min_gain),
        ];
        for (field, value) in finite {
            if !value.is_finite() {
                return Err(ConfigError::new(field, value, "must be a finite number"));
            }
        }
        if !(self.ell_star > 0.0 && self.ell_star < 1.0) {
            return Err(ConfigError::new(
                "ell_star",
                self.ell_star,
                "must be in (0, 1)",
            ));
        }
        if self.eps_off <= 0.0 {
            return Err(ConfigError::new("eps_off", self.eps_off, "must be > 0"));
        }
        if self.eps_on <= self.eps_off {
            return Err(ConfigError::new(
                "eps_off",
                self.eps_off,
                format!("must be < eps_on = {}", self.eps_on),
            ));
        }
        if self.tau <= self.tau_min {
            return Err(ConfigError::new(
                "tau",
                self.tau,
                format!("must be > tau_min = {}", self.tau_min),
            ));
        }
        if self.kappa <= 0.0 {
            return Err(ConfigError::new("kappa", self.kappa, "must be > 0"));
        }
        if self.m_max <= 0.0 {
            return Err(ConfigError::new("M_max", self.m_max, "must be > 0"));
        }
        if self.m_horizon <= 0.0 {
            return Err(ConfigError::new("M_H", self.m_horizon, "must be > 0"));
        }
        if self.horizon == 0 {
            return Err(ConfigError::new("H", 0.0, "must be >= 1"));
        }
        if !(0.0..1.0).contains(&self.min_gain) {
            return Err(ConfigError::new(
                "min_gain",
                self.min_gain,
                "must be in [0, 1)",
            ));
        }
        if let ThresholdRule::Relative { idle_floor } = self.threshold_rule
            && !(idle_floor.is_finite() && idle_floor > 0.0)
        {
            return Err(ConfigError::new(
                "idle_floor",
                idle_floor,
                "must be a finite number > 0",
            ));
        }
        if let Some(v_max) = self.v_max
            && v_max < self.v_min
        {
            return Err(ConfigError::new(
                "v_max",
                v_max as f64,
                format!("must be >= v_min = {}", self.v_min),
            ));
        }
        Ok(())
    }

    /// The per-step budget scale: `min(M_max, M_H / H)` under the paper's horizon rule,
    /// `M_max` under the sliding one (see [`HorizonRule::Sliding`]).
    pub fn step_budget_cap(&self) -> f64 {
        match self.horizon_rule {
            HorizonRule::Paper => self.m_max.min(self.m_horizon / self.horizon as f64),
            HorizonRule::Sliding => self.m_max,
        }
    }
}

impl Default for AchConfig {
    fn default() -> Self {
        AchConfig::paper()
    }
}

/// A parameter that breaks a rule: names the field, the value and the rule.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{field} = {value} {rule}")]
pub struct ConfigError {
    /// The parameter's name as in the paper (`eps_off`, `M_max`, ...).
    pub field: &'static str,
    /// The offending value.
    pub value: f64,
    /// The rule it breaks, e.g. `must be < eps_on = 0.1`.
    pub rule: String,
}

impl ConfigError {
    fn new(field: &'static str, value: f64, rule: impl Into<String>) -> ConfigError {
        ConfigError {
            field,
            value,
            rule: rule.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_fields_are_not_serialised_when_at_their_defaults() {
        let toml_like = serde_json::to_string(&AchConfig::paper()).unwrap();
        assert!(!toml_like.contains("horizon_rule") && !toml_like.contains("cooldown"));
        let live = serde_json::to_string(&AchConfig::live()).unwrap();
        assert!(live.contains(r#""horizon_rule":"sliding""#), "{live}");
        assert!(live.contains(r#""target":"live-mean""#), "{live}");
        assert!(
            live.contains(r#""threshold_rule":{"relative":{"idle_floor":0.05}}"#),
            "{live}"
        );
        let back: AchConfig = serde_json::from_str(&live).unwrap();
        assert_eq!(back, AchConfig::live());
    }

    #[test]
    fn paper_config_is_valid() {
        assert_eq!(AchConfig::paper().validate(), Ok(()));
        assert_eq!(AchConfig::paper().step_budget_cap(), 0.0025);
    }

    #[test]
    fn rules_are_enforced_with_clear_messages() {
        let mut c = AchConfig::paper();
        c.eps_off = 0.2;
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "eps_off = 0.2 must be < eps_on = 0.1"
        );
        let mut c = AchConfig::paper();
        c.tau = 0.5;
        assert_eq!(c.validate().unwrap_err().field, "tau");
        let mut c = AchConfig::paper();
        c.horizon = 0;
        assert_eq!(c.validate().unwrap_err().field, "H");
        let mut c = AchConfig::paper();
        c.kappa = f64::NAN;
        assert_eq!(c.validate().unwrap_err().rule, "must be a finite number");
        let mut c = AchConfig::live();
        c.threshold_rule = ThresholdRule::Relative { idle_floor: 0.0 };
        assert_eq!(c.validate().unwrap_err().field, "idle_floor");
        for bad in [-0.1, 1.0, f64::INFINITY] {
            let c = AchConfig {
                min_gain: bad,
                ..AchConfig::live()
            };
            assert_eq!(c.validate().unwrap_err().field, "min_gain", "{bad}");
        }
    }
}
