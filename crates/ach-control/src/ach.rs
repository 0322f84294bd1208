//! The ACH controller: Algorithm 1 of the paper, one step per call.

use ach_ring::{TokenMove, TokenRing};
use serde::{Deserialize, Serialize};

use crate::balancer::TokenLoadNeed;
use crate::balancer::{BUDGET_SLACK, Balancer, ConfirmError, Observation, Plan, Withheld};
use crate::budget::Budget;
use crate::config::{AchConfig, AssignRule, ConfigError, SelectRule, StepRule, TargetRule};
use crate::gain::predicted_gain;
use crate::hysteresis::{Hysteresis, HysteresisState, Thresholds};
use crate::intensity::{Intensity, IntensityParams, intensity};
use crate::planner::{
    SelectRules, TokenLoadInputs, assign_tokens, assign_tokens_by_arc, plan_by_token_load,
    select_tokens_under,
};

/// Below this, a sum of gains or needs counts as zero (spec section 4, step 5).
const NEGLIGIBLE: f64 = 1e-12;

/// The nodes a step moves load between (spec section 4, step 4).
struct Sides {
    /// The overloaded nodes (hysteresis state 1), each with its gain `max(l_i - l*, 0)`.
    sources: Vec<(usize, f64)>,
    /// The underloaded nodes (state -1), each with its need `max(l* - l_j, 0)`.
    receivers: Vec<(usize, f64)>,
}

impl Sides {
    /// The sides of the nodes in hysteresis `states` with `loads` around the target.
    fn of(states: &[HysteresisState], loads: &[f64], target: f64) -> Sides {
        Sides {
            sources: (0..loads.len())
                .filter(|&i| states[i] == 1)
                .map(|i| (i, (loads[i] - target).max(0.0)))
                .collect(),
            receivers: (0..loads.len())
                .filter(|&j| states[j] == -1)
                .map(|j| (j, (target - loads[j]).max(0.0)))
                .collect(),
        }
    }
}

/// What ACH computed at its last step, for tracing and for the budget invariant.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AchStep {
    /// The intensity `C` and its factors.
    pub intensity: Intensity,
    /// The step budget `m` (0 when the horizon is spent).
    pub budget: f64,
    /// Number of overloaded nodes `|O|`.
    pub n_sources: usize,
    /// Number of underloaded nodes `|U|`.
    pub n_receivers: usize,
    /// `M_keys` of the step's plan.
    pub m_keys: f64,
    /// The budget invariant's bound: `m + |O| * max_s L[s]` under the paper's step rule, `m`
    /// under the strict one (0 when nothing moved).
    pub bound: f64,
    /// The target load `l*` the step used (fixed, or the live mean).
    pub target: f64,
    /// The predicted gain of the step's planned moves (the fraction of the load above `l*`
    /// they would remove), when `min_gain` is set and the step planned moves; not saved in
    /// [`AchState`].
    pub predicted_gain: Option<f64>,
}

/// The ACH controller.
///
/// A plan costs nothing until it is confirmed: [`Balancer::confirm`] charges the budget window
/// (and starts the cool-down of the moved tokens) with what was really switched. Only the plan
/// of the latest step can be confirmed, in whole or in parts, each move once.
///
/// ```
/// use ach_control::{Ach, AchConfig, Balancer, Observation, commit};
/// use ach_ring::TokenRing;
///
/// // Twenty evenly spaced tokens, round-robin over two nodes; node 0 is overloaded.
/// let positions = (0..20).map(|s| s as f64 / 20.0).collect();
/// let mut ring = TokenRing::round_robin(positions, 2).unwrap();
/// let mut ach = Ach::new(AchConfig::paper()).unwrap();
/// let loads = [0.90, 0.40];
/// let observation = Observation { step: 0, loads: &loads, total_load: 0.50, live: &[true, true], token_loads: None };
/// let plan = ach.plan(&ring, &observation);
/// // One token (the longest arc of node 0) passes to node 1, within the budget.
/// assert_eq!(plan.moves.len(), 1);
/// assert!(plan.within_budget());
/// commit(&mut ring, &plan).unwrap();
/// ach.confirm(&plan).unwrap();
/// assert_eq!(ring.counts(2), vec![9, 11]);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Ach {
    config: AchConfig,
    hysteresis: Hysteresis,
    budget: Budget,
    last: AchStep,
    budget_violations: u64,
    /// Number of steps planned so far; the next plan is step `steps`.
    steps: u64,
    /// The step at which each token's last confirmed move was planned, for the cool-down.
    moved_at: Vec<Option<u64>>,
    /// The moves of the latest plan not confirmed yet, with their arcs, sorted by token.
    pending: Vec<(TokenMove, f64)>,
}

impl Ach {
    /// A controller with the given parameters, or the first rule they break.
    pub fn new(config: AchConfig) -> Result<Ach, ConfigError> {
        config.validate()?;
        Ok(Ach {
            config,
            hysteresis: Hysteresis::default(),
            budget: Budget::default(),
            last: AchStep::default(),
            budget_violations: 0,
            steps: 0,
            moved_at: Vec::new(),
            pending: Vec::new(),
        })
    }

    /// The parameters.
    pub fn config(&self) -> &AchConfig {
        &self.config
    }

    /// Changes the parameters of a running controller, keeping its state (hysteresis, budget
    /// window, cool-downs). Rejects, and changes nothing, parameters that break a rule.
    pub fn set_config(&mut self, config: AchConfig) -> Result<(), ConfigError> {
        config.validate()?;
        self.config = config;
        Ok(())
    }

    /// Changes the fixed target load `l*` of a running controller (see [`Ach::set_config`]).
    pub fn set_target(&mut self, ell_star: f64) -> Result<(), ConfigError> {
        self.set_config(AchConfig {
            ell_star,
            ..self.config.clone()
        })
    }

    /// What the last step computed.
    pub fn last_step(&self) -> &AchStep {
        &self.last
    }

    /// The hysteresis state of every node after the last step.
    pub fn hysteresis(&self) -> &[HysteresisState] {
        self.hysteresis.states()
    }

    /// How many steps broke the budget invariant (a bug if ever non-zero).
    pub fn budget_violations(&self) -> u64 {
        self.budget_violations
    }

    /// The confirmed `M_keys` of the last `H` steps, oldest first (the horizon window).
    pub fn budget_window(&self) -> Vec<f64> {
        self.budget.window().collect()
    }

    /// The target load for these loads under the configured rule.
    fn target(&self, loads: &[f64], live: &[bool]) -> f64 {
        match self.config.target {
            TargetRule::Fixed => self.config.ell_star,
            TargetRule::LiveMean => {
                let (sum, n) = loads
                    .iter()
                    .enumerate()
                    .filter(|&(i, l)| live.get(i).copied().unwrap_or(true) && l.is_finite())
                    .fold((0.0, 0usize), |(sum, n), (_, &l)| (sum + l, n + 1));
                if n == 0 {
                    self.config.ell_star
                } else {
                    sum / n as f64
                }
            }
        }
    }

    fn plan_step(&mut self, ring: &TokenRing, obs: &Observation<'_>) -> Plan {
        let loads = obs.loads;
        let target = self.target(loads, obs.live);
        let (intensity, budget) = self.update_intensity_and_budget(obs, target);
        let c = &self.config;
        let sides = Sides::of(self.hysteresis.states(), loads, target);
        let (sources, receivers) = (&sides.sources, &sides.receivers);
        self.last = AchStep {
            intensity,
            budget,
            n_sources: sources.len(),
            n_receivers: receivers.len(),
            m_keys: 0.0,
            bound: 0.0,
            target,
            predicted_gain: None,
        };
        if intensity.c <= 0.0 || budget <= 0.0 || sources.is_empty() || receivers.is_empty() {
            return Plan::none();
        }
        let gain_sum: f64 = sources.iter().map(|s| s.1).sum();
        let need_sum: f64 = receivers.iter().map(|r| r.1).sum();
        if gain_sum < NEGLIGIBLE || need_sum < NEGLIGIBLE {
            return Plan::none();
        }
        let token_loads = obs
            .token_loads
            .filter(|t| c.select_rule == SelectRule::ByTokenLoad && t.len() == ring.len());
        let Some(moves) = self.select_moves(ring, obs, token_loads, &sides, budget) else {
            return Plan::none();
        };
        if c.min_gain > 0.0 {
            let gain = predicted_gain(ring, &moves, loads, obs.live, token_loads, target);
            self.last.predicted_gain = Some(gain);
            if gain < c.min_gain {
                return Plan {
                    withheld: Some(Withheld {
                        moves: moves.iter().filter(|mv| mv.from != mv.to).count(),
                        gain,
                        min_gain: c.min_gain,
                    }),
                    ..Plan::none()
                };
            }
        }
        let mut plan = Plan::from_moves(ring, moves);
        let bound = match c.step_rule {
            StepRule::Paper => budget + sources.len() as f64 * ring.max_arc(),
            StepRule::Strict => budget,
        };
        plan.budget_bound = Some(bound);
        self.last.m_keys = plan.m_keys;
        self.last.bound = bound;
        plan
    }

    /// Updates the hysteresis with the step's loads and returns the intensity `C` and the
    /// step budget `m` (spec section 4, steps 1 to 3). The hysteresis and the intensity see
    /// the loads in the unit of the threshold rule (load units under the paper's rule, where
    /// nothing is divided).
    fn update_intensity_and_budget(
        &mut self,
        obs: &Observation<'_>,
        target: f64,
    ) -> (Intensity, f64) {
        let c = &self.config;
        let scale = c.threshold_rule.scale(target);
        let scaled: std::borrow::Cow<'_, [f64]> = if scale == 1.0 {
            std::borrow::Cow::Borrowed(obs.loads)
        } else {
            std::borrow::Cow::Owned(obs.loads.iter().map(|l| l / scale).collect())
        };
        self.hysteresis.update(
            &scaled,
            obs.live,
            Thresholds {
                target: target / scale,
                eps_on: c.eps_on,
                eps_off: c.eps_off,
            },
        );
        let intensity = intensity(
            &scaled,
            obs.live,
            obs.total_load,
            IntensityParams {
                target: target / scale,
                tau: c.tau,
                tau_min: c.tau_min,
                kappa: c.kappa,
            },
        );
        let budget = self.budget.step_budget_under(
            c.horizon_rule,
            intensity.c,
            c.step_budget_cap(),
            c.m_horizon,
            c.horizon,
        );
        (intensity, budget)
    }

    /// The step's moves within `budget` from the sources to the receivers (spec section 4,
    /// steps 5 and 6): by the tokens' loads when `token_loads` is given, else the tokens the
    /// select rule takes, assigned by the assign rule. `None` when no token can move (no
    /// move by the tokens' loads, or no token selected).
    fn select_moves(
        &self,
        ring: &TokenRing,
        obs: &Observation<'_>,
        token_loads: Option<&[f64]>,
        sides: &Sides,
        budget: f64,
    ) -> Option<Vec<TokenMove>> {
        let c = &self.config;
        let loads = obs.loads;
        let counts = ring.counts(loads.len());
        let (step, cooldown, moved_at) = (self.steps, c.cooldown, &self.moved_at);
        let movable = |token: usize| match moved_at.get(token).copied().flatten() {
            Some(at) => step.saturating_sub(at) >= cooldown,
            None => true,
        };
        let rules = SelectRules {
            v_min: c.v_min,
            step_rule: c.step_rule,
            movable: &movable,
        };
        if let Some(token_loads) = token_loads {
            let inputs = TokenLoadInputs {
                sources: &sides.sources,
                receivers: &sides.receivers,
                loads,
                live: obs.live,
                token_loads,
                budget,
                counts: &counts,
                v_max: c.v_max,
            };
            let moves = plan_by_token_load(ring, &inputs, rules);
            return (!moves.is_empty()).then_some(moves);
        }
        let pool = select_tokens_under(ring, &sides.sources, budget, &counts, rules);
        if pool.is_empty() {
            return None;
        }
        Some(match c.assign_rule {
            AssignRule::Paper => assign_tokens(&pool, &sides.receivers, loads, &counts, c.v_max),
            AssignRule::ByArc => {
                assign_tokens_by_arc(ring, &pool, &sides.receivers, &counts, c.v_max)
            }
        })
    }

    /// The saved state: everything a restarted controller needs to continue where this one
    /// stopped (the parameters are saved by the caller, as they are configuration).
    pub fn state(&self) -> AchState {
        let bits = |x: f64| x.to_bits();
        AchState {
            version: ACH_STATE_VERSION,
            hysteresis: self.hysteresis.states().to_vec(),
            window_bits: self.budget.window().map(bits).collect(),
            recorded: self.budget.recorded(),
            steps: self.steps,
            moved_at: self
                .moved_at
                .iter()
                .enumerate()
                .filter_map(|(token, at)| at.map(|at| (token, at)))
                .collect(),
            pending: self
                .pending
                .iter()
                .map(|&(mv, arc)| (mv, arc.to_bits()))
                .collect(),
            budget_violations: self.budget_violations,
            last_step_bits: [
                self.last.intensity.gamma,
                self.last.intensity.overload,
                self.last.intensity.eta,
                self.last.intensity.c,
                self.last.budget,
                self.last.m_keys,
                self.last.bound,
                self.last.target,
            ]
            .map(bits),
            last_sets: [self.last.n_sources, self.last.n_receivers],
        }
    }

    /// A controller with parameters `config` that continues from a saved state. Fails when
    /// the parameters break a rule or the state has an unknown version.
    pub fn from_state(config: AchConfig, state: &AchState) -> Result<Ach, StateError> {
        if state.version != ACH_STATE_VERSION {
            return Err(StateError::UnsupportedVersion {
                found: state.version,
                supported: ACH_STATE_VERSION,
            });
        }
        let mut ach = Ach::new(config)?;
        ach.hysteresis = Hysteresis::restore(state.hysteresis.clone());
        ach.budget = Budget::restore(
            state.window_bits.iter().map(|&b| f64::from_bits(b)),
            state.recorded,
        );
        ach.steps = state.steps;
        let tokens = state
            .moved_at
            .iter()
            .map(|&(t, _)| t + 1)
            .max()
            .unwrap_or(0);
        ach.moved_at = vec![None; tokens];
        for &(token, at) in &state.moved_at {
            ach.moved_at[token] = Some(at);
        }
        ach.pending = state
            .pending
            .iter()
            .map(|&(mv, arc)| (mv, f64::from_bits(arc)))
            .collect();
        ach.budget_violations = state.budget_violations;
        let [gamma, overload, eta, c, budget, m_keys, bound, target] =
            state.last_step_bits.map(f64::from_bits);
        ach.last = AchStep {
            intensity: Intensity {
                gamma,
                overload,
                eta,
                c,
            },
            budget,
            n_sources: state.last_sets[0],
            n_receivers: state.last_sets[1],
            m_keys,
            bound,
            target,
            predicted_gain: None,
        };
        Ok(ach)
    }
}

/// The version of [`AchState`] this release writes and reads.
pub const ACH_STATE_VERSION: u32 = 1;

/// Saved state of an [`Ach`] controller: versioned, serde, exact (every `f64` stored as its
/// bits, so any serde format gives back an equal controller).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AchState {
    /// Format version ([`ACH_STATE_VERSION`]).
    pub version: u32,
    /// Hysteresis state of every node.
    pub hysteresis: Vec<HysteresisState>,
    /// The horizon window's confirmed `M_keys`, oldest first, as `f64` bits.
    pub window_bits: Vec<u64>,
    /// Number of steps recorded in the window.
    pub recorded: u64,
    /// Number of steps planned.
    pub steps: u64,
    /// `(token, step)` of every token's last confirmed move.
    pub moved_at: Vec<(usize, u64)>,
    /// The unconfirmed moves of the latest plan, with their arcs as `f64` bits.
    pub pending: Vec<(TokenMove, u64)>,
    /// Steps that broke the budget invariant.
    pub budget_violations: u64,
    /// The last step's `gamma, I, eta, C, m, M_keys, bound, l*`, as `f64` bits.
    pub last_step_bits: [u64; 8],
    /// The last step's `|O|` and `|U|`.
    pub last_sets: [usize; 2],
}

/// Why a saved controller state could not be restored.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum StateError {
    /// The state has a version this release cannot read.
    #[error("saved controller state has version {found}; this release reads version {supported}")]
    UnsupportedVersion {
        /// The version found.
        found: u32,
        /// The version this release reads.
        supported: u32,
    },
    /// The parameters break a rule.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

impl Balancer for Ach {
    fn name(&self) -> &'static str {
        "ACH"
    }

    fn plan(&mut self, ring: &TokenRing, observation: &Observation<'_>) -> Plan {
        let plan = self.plan_step(ring, observation);
        if plan.m_keys > self.last.bound + BUDGET_SLACK && !plan.moves.is_empty() {
            self.budget_violations += 1;
        }
        // The step opens its slot in the window with nothing spent; confirming charges it.
        self.budget.record(0.0, self.config.horizon);
        self.pending = plan
            .moves
            .iter()
            .filter(|mv| mv.from != mv.to)
            .map(|&mv| (mv, ring.arcs().get(mv.token).copied().unwrap_or(0.0)))
            .collect();
        self.steps += 1;
        plan
    }

    fn token_load_need(&self) -> TokenLoadNeed {
        match self.config.select_rule {
            SelectRule::Paper => TokenLoadNeed::None,
            SelectRule::ByTokenLoad => TokenLoadNeed::Observed,
        }
    }

    fn confirm(&mut self, plan: &Plan) -> Result<f64, ConfirmError> {
        // Check every move before changing anything.
        let mut found = Vec::with_capacity(plan.moves.len());
        for mv in plan.moves.iter().filter(|mv| mv.from != mv.to) {
            let Some(k) = self.pending.iter().position(|(p, _)| p == mv) else {
                return Err(ConfirmError::NotPending { mv: *mv });
            };
            if found.contains(&k) {
                return Err(ConfirmError::NotPending { mv: *mv });
            }
            found.push(k);
        }
        // Sum in the plan's (token) order, as `Plan::from_moves` does, so that a whole plan is
        // charged exactly its `M_keys`.
        let charged: f64 = found.iter().map(|&k| self.pending[k].1).sum();
        let step = self.steps.saturating_sub(1);
        for &k in &found {
            let token = self.pending[k].0.token;
            if self.moved_at.len() <= token {
                self.moved_at.resize(token + 1, None);
            }
            self.moved_at[token] = Some(step);
        }
        found.sort_unstable();
        for k in found.into_iter().rev() {
            self.pending.remove(k);
        }
        if charged != 0.0 {
            self.budget.charge(charged);
        }
        Ok(charged)
    }
}
