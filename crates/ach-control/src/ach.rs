//! The ACH controller: Algorithm 1 of the paper, one step per call.

use ach_ring::TokenRing;

use crate::balancer::{BUDGET_SLACK, Balancer, Observation, Plan};
use crate::budget::Budget;
use crate::config::{AchConfig, ConfigError};
use crate::hysteresis::{Hysteresis, HysteresisState, Thresholds};
use crate::intensity::{Intensity, IntensityParams, intensity};
use crate::planner::{assign_tokens, select_tokens};

/// Below this, a sum of gains or needs counts as zero (spec section 4, step 5).
const NEGLIGIBLE: f64 = 1e-12;

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
    /// The budget invariant's bound `m + |O| * max_s L[s]` (0 when nothing moved).
    pub bound: f64,
}

/// The ACH controller.
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
/// let observation = Observation { step: 0, loads: &loads, total_load: 0.50, live: &[true, true] };
/// let plan = ach.plan(&ring, &observation);
/// // One token (the longest arc of node 0) passes to node 1, within the budget.
/// assert_eq!(plan.moves.len(), 1);
/// assert!(plan.within_budget());
/// commit(&mut ring, &plan).unwrap();
/// assert_eq!(ring.counts(2), vec![9, 11]);
/// ```
#[derive(Clone, Debug)]
pub struct Ach {
    config: AchConfig,
    hysteresis: Hysteresis,
    budget: Budget,
    last: AchStep,
    budget_violations: u64,
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
        })
    }

    /// The parameters.
    pub fn config(&self) -> &AchConfig {
        &self.config
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

    fn plan_step(&mut self, ring: &TokenRing, obs: &Observation<'_>) -> Plan {
        let c = &self.config;
        let loads = obs.loads;
        self.hysteresis.update(
            loads,
            obs.live,
            Thresholds {
                target: c.ell_star,
                eps_on: c.eps_on,
                eps_off: c.eps_off,
            },
        );
        let intensity = intensity(
            loads,
            obs.live,
            obs.total_load,
            IntensityParams {
                target: c.ell_star,
                tau: c.tau,
                tau_min: c.tau_min,
                kappa: c.kappa,
            },
        );
        let budget =
            self.budget
                .step_budget(intensity.c, c.step_budget_cap(), c.m_horizon, c.horizon);
        let states = self.hysteresis.states();
        let sources: Vec<(usize, f64)> = (0..loads.len())
            .filter(|&i| states[i] == 1)
            .map(|i| (i, (loads[i] - c.ell_star).max(0.0)))
            .collect();
        let receivers: Vec<(usize, f64)> = (0..loads.len())
            .filter(|&j| states[j] == -1)
            .map(|j| (j, (c.ell_star - loads[j]).max(0.0)))
            .collect();
        self.last = AchStep {
            intensity,
            budget,
            n_sources: sources.len(),
            n_receivers: receivers.len(),
            m_keys: 0.0,
            bound: 0.0,
        };
        if intensity.c <= 0.0 || budget <= 0.0 || sources.is_empty() || receivers.is_empty() {
            return Plan::none();
        }
        let gain_sum: f64 = sources.iter().map(|s| s.1).sum();
        let need_sum: f64 = receivers.iter().map(|r| r.1).sum();
        if gain_sum < NEGLIGIBLE || need_sum < NEGLIGIBLE {
            return Plan::none();
        }
        let counts = ring.counts(loads.len());
        let pool = select_tokens(ring, &sources, budget, &counts, c.v_min);
        if pool.is_empty() {
            return Plan::none();
        }
        let moves = assign_tokens(&pool, &receivers, loads, &counts, c.v_max);
        let mut plan = Plan::from_moves(ring, moves);
        let bound = budget + sources.len() as f64 * ring.max_arc();
        plan.budget_bound = Some(bound);
        self.last.m_keys = plan.m_keys;
        self.last.bound = bound;
        plan
    }
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
        self.budget.record(plan.m_keys, self.config.horizon);
        plan
    }
}
